"""The trace context: what is being built while a function is traced.

One `TraceContext` exists per compilation. It owns the IR builder (whose insertion-point stack
follows the regions being traced: function bodies, loop bodies, branches), the functions
emitted so far (QNodes become their own `func.func`), and, while a QNode body is traced, the
`QuantumScope` that collects PennyLane's queued operations.

The stack of active contexts is per thread: a trace in one thread never changes what code
running in another thread sees (`is_tracing()` there stays False, so its compiled functions
run and its PennyLane QNodes execute as usual).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Block, SSAValue
from xdsl.rewriter import InsertPoint

from cofactor.ir.builder import IRBuilder, return_op

if TYPE_CHECKING:
    from cofactor.tracing.qnode import QuantumScope


class _ThreadState(threading.local):
    def __init__(self) -> None:
        self.stack: list[TraceContext] = []  # active trace contexts of this thread


_LOCAL = _ThreadState()
# Traces active in all threads: `is_tracing()` runs on every compiled call, and reading a
# module global is cheaper than reading a thread-local, so the common case (nobody traces)
# never touches the thread-local.
_ACTIVE_TRACES = 0
_ACTIVE_LOCK = threading.Lock()


# Symbols that compiled code calls by name: libm (math-to-libm and the frontend's own math
# calls), the C library (memref lowering, Enzyme), cofactor's runtime and Enzyme's markers.
# A function of the module with one of these names would be called in their place (a user
# function `exp` calling itself forever), so user-derived names avoid them. Other clashes
# with symbols of loaded libraries (glibc's `step`) are handled by linking -Bsymbolic.
_MATH = (
    "acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh erf erfc exp exp2 "
    "expm1 fabs floor fma fmax fmin fmod hypot ldexp lgamma log log10 log1p log2 nearbyint "
    "pow remainder rint round sin sinh sqrt tan tanh tgamma trunc"
).split()
RESERVED_SYMBOLS = frozenset(
    [*_MATH, *(f + "f" for f in _MATH)]
    + "malloc calloc realloc free aligned_alloc memcpy memmove memset abort exit main".split()
)
_RESERVED_PREFIXES = ("cf_rt_", "__enzyme", "enzyme_", "_mlir_", "__cofactor", "llvm.")


def is_reserved_symbol(name: str) -> bool:
    """Whether a function of the module must not take `name` (see RESERVED_SYMBOLS)."""
    return name in RESERVED_SYMBOLS or name.startswith(_RESERVED_PREFIXES)


class TraceContext:
    """State of one trace: the IR under construction and the active quantum scope."""

    def __init__(self, name: str, *, seed: int | None = None) -> None:
        self.name = name
        self.seed = seed
        self.builder = IRBuilder()
        self.functions: dict[Any, str] = {}  # cache key -> emitted func name
        # objects whose id() is part of a key in `functions` (QNodes, unhashable static
        # arguments of theirs): held for the whole trace, since a freed object's id is soon
        # another's (a QNode made in a Python loop would reuse the first one's circuit)
        self.key_owners: list[Any] = []
        self.quantum: QuantumScope | None = None
        self._names: set[str] = {name}
        self.has_quantum = False
        self.qnode_count = 0  # circuit functions emitted so far
        # entry blocks of the functions being emitted (innermost last) and, per entry block,
        # the buffers allocated there that must be freed before the function returns
        self.function_entries: list[Block] = []
        self._hoisted: dict[int, list[SSAValue]] = {}
        # gradients: the methods ("auto" = Enzyme, "fd") of the functions being traced for
        # differentiation (innermost last), facts about the emitted circuit functions, and
        # whether the module calls Python callbacks
        self.diff_stack: list[str] = []
        self.qnode_info: dict[str, Any] = {}
        self.has_callbacks = False
        # the compiled code reports errors through the runtime's error slot (bounds checks
        # of traced indices, interrupts): the launcher must check the slot after each call
        self.runtime_checks = False
        # loops check for Ctrl-C (tracing/interrupts.py): the counter as read at the start of
        # each function (by entry block id), and whether the module needs the helpers
        self.interrupt_counts: dict[int, SSAValue] = {}
        self.interrupt_checks = False
        # qjit(disable_assertions=True): debug_assert compiles no check
        self.disable_assertions = False

    def hoisted_alloc(self, type_: MemRefType, *, heap: bool = True) -> SSAValue:
        """A buffer allocated once at the start of the current function (not inside the loop
        or branch being traced), so repeated executions reuse it; freed at return."""
        block = self.function_entries[-1]
        self.builder.push_at(InsertPoint.at_start(block))
        try:
            ref = self.builder.alloc(type_) if heap else self.builder.alloca(type_)
        finally:
            self.builder.pop()
        if heap:
            self._hoisted.setdefault(id(block), []).append(ref)
        return ref

    def finish_function(self, block: Block) -> None:
        """Free the hoisted buffers and return (at the current insertion point)."""
        for ref in self._hoisted.pop(id(block), []):
            self.builder.dealloc(ref)
        self.builder.insert(return_op())
        self.function_entries.pop()

    def fresh_name(self, base: str) -> str:
        """A function name not used yet in this module."""
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "f"
        name, i = base, 0
        while name in self._names or is_reserved_symbol(name):
            i += 1
            name = f"{base}_{i}"
        self._names.add(name)
        return name


def current() -> TraceContext:
    """The active trace context (raises if nothing is being traced)."""
    stack = _LOCAL.stack
    if not stack:
        raise RuntimeError("no cofactor trace is active")
    return stack[-1]


def differentiation_method(ctx: TraceContext | None = None) -> str | None:
    """`"auto"` when the code being traced is differentiated by Enzyme (directly or through
    an enclosing function), "fd" when only by finite differences, None otherwise."""
    ctx = ctx or current()
    if "auto" in ctx.diff_stack:
        return "auto"
    return "fd" if ctx.diff_stack else None


def is_tracing() -> bool:
    """True while cofactor traces a function (inside `qjit` compilation) in this thread."""
    return _ACTIVE_TRACES > 0 and bool(_LOCAL.stack)


@contextlib.contextmanager
def tracing(ctx: TraceContext) -> Iterator[TraceContext]:
    global _ACTIVE_TRACES
    stack = _LOCAL.stack
    stack.append(ctx)
    with _ACTIVE_LOCK:
        _ACTIVE_TRACES += 1
    try:
        yield ctx
    finally:
        with _ACTIVE_LOCK:
            _ACTIVE_TRACES -= 1
        stack.pop()


# (id(owner), attribute) -> [number of traces using the replacement, original value]
_INTERCEPTED: dict[tuple[int, str], list[Any]] = {}
_INTERCEPT_LOCK = threading.Lock()

# (id(owner), attribute, make) -> (owner, original, make(original)): the replacements of
# the intercepts every trace enters, made once per process (`prepare`, when their module is
# imported) rather than on every trace: making them (a closure each, by a function that runs
# once per process) was ~0.1 ms of the cached first call of a process. Only for `make`s
# that are pure functions of the original, listed once per process (`reusable=True`); a
# replacement is reused only while the attribute still holds the same original.
_PREPARED: dict[tuple[int, str, Any], tuple[Any, Any, Any]] = {}
_PREPARED_LIMIT = 1024  # (a bound: a caller that passed new `make`s every trace by mistake)


def _replacement(owner: Any, attr: str, make: Callable[[Any], Any], original: Any) -> Any:
    """`make(original)`, the one made before for this owner, attribute, make and original."""
    key = (id(owner), attr, make)
    prepared = _PREPARED.get(key)
    if prepared is not None and prepared[0] is owner and prepared[1] is original:
        return prepared[2]
    replacement = make(original)
    if len(_PREPARED) < _PREPARED_LIMIT:
        _PREPARED[key] = (owner, original, replacement)
    return replacement


def prepare(items: list[tuple[Any, str, Callable[[Any], Any]]]) -> None:
    """Make the replacements of `items` now (each `make` a pure function of the original,
    the same objects on every trace): the traces that enter `intercepts(items,
    reusable=True)` then install them without making them."""
    with _INTERCEPT_LOCK:
        for owner, attr, make in items:
            if (id(owner), attr) not in _INTERCEPTED:  # (else: the replacement is installed)
                _replacement(owner, attr, make, getattr(owner, attr))


class intercept:  # (lower case: used like the function it was, `with intercept(...)`)
    """Replace `owner.attr` by `make(original)` while at least one thread traces.

    The replacement is shared by every thread (attributes of classes and modules are
    process-wide), so it must dispatch on `is_tracing()`: in a thread that does not trace
    it has to behave exactly like the original. The first trace installs it, the last one
    to finish puts the original back. (A class rather than a generator context manager:
    every trace enters eleven of them, on a cached first call too.)"""

    __slots__ = ("_owner", "_attr", "_make", "_entry", "_reusable")

    def __init__(
        self, owner: Any, attr: str, make: Callable[[Any], Any], reusable: bool = False
    ) -> None:
        self._owner, self._attr, self._make = owner, attr, make
        self._reusable = reusable  # (see `prepare`)

    def __enter__(self) -> None:
        owner, attr = self._owner, self._attr
        key = (id(owner), attr)
        with _INTERCEPT_LOCK:
            entry = _INTERCEPTED.get(key)
            if entry is None:
                original = getattr(owner, attr)
                # (made before the entry is recorded: a `make` that raises leaves none,
                # which would make the next trace skip the replacement)
                replacement = (
                    _replacement(owner, attr, self._make, original)
                    if self._reusable
                    else self._make(original)
                )
                entry = _INTERCEPTED[key] = [0, original]
                setattr(owner, attr, replacement)
            entry[0] += 1
        self._entry = entry

    def __exit__(self, *exc_info: object) -> None:
        entry = self._entry
        with _INTERCEPT_LOCK:
            entry[0] -= 1
            if entry[0] == 0:
                del _INTERCEPTED[(id(self._owner), self._attr)]
                setattr(self._owner, self._attr, entry[1])


class intercepts:  # (lower case, like `intercept`)
    """`intercept` of several `(owner, attr, make)` at once, entered in order and left in
    reverse, as an ExitStack of them would (whose machinery cost more than the intercepts
    on a cached first call: a circuit's trace enters nineteen)."""

    __slots__ = ("_items", "_entered")

    def __init__(
        self, items: list[tuple[Any, str, Callable[[Any], Any]]], reusable: bool = False
    ) -> None:
        self._items = [intercept(owner, attr, make, reusable) for owner, attr, make in items]
        self._entered: list[intercept] = []

    def __enter__(self) -> None:
        entered = self._entered = []
        try:
            for item in self._items:
                item.__enter__()
                entered.append(item)
        except BaseException:
            self.__exit__()
            raise

    def __exit__(self, *exc_info: object) -> None:
        entered = self._entered
        while entered:
            entered.pop().__exit__()


class EvaluationContext:
    """PennyLane's compiler-plugin hook (`pennylane.compilers` entry point `cofactor.context`):
    `qml.compiler.active()` asks it, so it answers for the calling thread only."""

    @classmethod
    def is_tracing(cls) -> bool:
        return is_tracing()
