"""Structured control flow on traced values: `for_loop`, `while_loop`, `cond`.

Each takes Python functions and, while tracing, turns them into one `scf` op whose region
holds the traced body: values carried from one iteration to the next (or returned from a
branch) become the op's iteration arguments / results, one SSA value per array element.
Quantum operations queued inside a body are emitted inside the region (see
`QuantumScope.flush`). Outside `qjit` all three behave like the plain Python they replace.

The code lives in one module per concept: carried_values.py (the carried values, tracing
into a region), loops.py (`for_loop`, `while_loop`), branches.py (`cond`). This module keeps
the names the rest of the frontend imports from it.
"""

from cofactor.api_extensions.branches import (
    CondCallable,
    _cond_or_python,
    _traced_cond,
    cond,
    predicate_error,
    static_truth,
)
from cofactor.api_extensions.carried_values import Carry, traced_region
from cofactor.api_extensions.loops import _traced_for, _traced_while, for_loop, while_loop

__all__ = [
    "Carry",
    "CondCallable",
    "_cond_or_python",
    "_traced_cond",
    "_traced_for",
    "_traced_while",
    "cond",
    "for_loop",
    "predicate_error",
    "static_truth",
    "traced_region",
    "while_loop",
]
