"""Dead-code removal in a traced function, before Enzyme differentiates it.

Why: Enzyme (the version cofactor builds against) fails with "Illegal replace ficticious
phi" on a differentiated function that computes something nobody uses from a differentiated
array when that computation calls the C math library (`tanh`, `arctan`: calls LLVM may not
delete, since they may write errno) and a loop of the same function reads that array:
Enzyme's preprocessing rewrites the loop's addresses from the unused load's address, then
drops that address as unneeded in the reverse pass (tests/frontend/test_dead_code.py). A
traced program has such code whenever a value is computed and discarded, e.g. an unused
`for_loop` over an updated copy of an argument (A11). Enzyme never needs that code: remove it.

What is removed is what cannot be observed: ops without side effects whose results no
live op uses, loops and branches (`scf.for`, `scf.while`, `scf.if`) whose results are unused
and whose bodies have no side effects, the values a live loop or branch carries or returns
that nobody reads (its unused iteration arguments / results), and buffers allocated in the
function that are only written (their stores and frees). Everything else is live: calls
(other than the C math library and the Ctrl-C checks of loops), quantum and gradient ops,
stores into memory the function did not allocate, stores into a buffer from which a live
op loads (all of them: no ordering analysis) or that anything else uses (a call, a view, a
copy), any op this module does not know. A dead `while_loop` is removed even if it would
not terminate, as JAX's and MLIR's dead-code removal do.

The analysis marks live ops from those roots (an op is dead until proven live), then erases
the rest and narrows the loops and branches that carry dead values.
"""

from __future__ import annotations

from collections.abc import Iterator

from xdsl.dialects import scf
from xdsl.ir import Block, BlockArgument, Operation, OpResult, SSAValue

from cofactor.ir.mlir15 import LIBM_FUNCTIONS
from cofactor.ir.scf_ops import for_op, if_op, while_op

#: func.call callees without observable effects: the C math library (errno is never read)
#: and the Ctrl-C checks of loops (tracing/interrupts.py: a removed loop needs no check).
PURE_CALLEES = frozenset({*LIBM_FUNCTIONS, "cofactor_interrupt_count", "cofactor_interrupted"})

#: ops without side effects beside the arith and math dialects (loads read memory: the
#: stores they may read are kept live by `_Liveness.load`)
_PURE_OPS = frozenset(
    {
        "memref.load",
        "memref.alloc",
        "memref.alloca",
        "memref.get_global",
        "memref.dim",
    }
)
#: (Checked by exact type: `isinstance` against xDSL's classes, abstract base classes, runs
#: a Python-level check each time; the analysis asks for every op and value it visits,
#: a fifth of its time on the first call of a gradient of tanh(W x). None is subclassed.)
_LOOPS = frozenset({scf.ForOp, scf.WhileOp, scf.IfOp})


def op_name(op: Operation) -> str:
    """The op's name (for ops emitted in generic form, the name they print)."""
    attr = op.attributes.get("op_name__")
    return attr.data if attr is not None else op.name  # type: ignore[attr-defined]


def _callee(op: Operation) -> str | None:
    callee = op.properties.get("callee")
    return callee.string_value() if callee is not None else None  # type: ignore[attr-defined]


def _is_pure(op: Operation, name: str) -> bool:
    if name.startswith(("arith.", "math.")) or name in _PURE_OPS:
        return True
    return name == "func.call" and _callee(op) in PURE_CALLEES


def _walk(block: Block) -> Iterator[Operation]:
    """Every op of `block` and of the regions nested in it, parents before children."""
    for op in block.ops:
        yield op
        for region in op.regions:
            for inner in region.blocks:
                yield from _walk(inner)


class _Liveness:
    """Live ops (by id) and, for each live loop or branch, its live slots: slot i of an
    `scf.if` is its result i; of an `scf.for`, its carried value i (init, body argument
    i + 1, yielded value i, result i); of an `scf.while` whose condition forwards its
    arguments unchanged, carried value i (as for `scf.for`, in both regions)."""

    def __init__(self, body: Block) -> None:
        self.body = body
        self.live: set[int] = set()
        self.slots: dict[int, set[int]] = {}
        self.work: list[Operation] = []
        #: buffers allocated in the function, by id of their value -> the stores into them
        self.stores: dict[int, list[Operation]] = {}
        #: those of them anything but loads, stores into them and frees use
        self.escaped: set[int] = set()

    # -- marking --------------------------------------------------------------------------
    def mark(self, op: Operation) -> None:
        if id(op) not in self.live:
            self.live.add(id(op))
            self.work.append(op)

    def mark_value(self, value: SSAValue) -> None:
        if type(value) is OpResult:
            owner = value.op
            if type(owner) in _LOOPS and _sloted(owner):
                self.mark_slot(owner, value.index)
            else:
                self.mark(owner)
            return
        assert type(value) is BlockArgument
        owner = value.block.parent_op()
        if owner is None or value.block is self.body:
            return  # an argument of the function
        if (kind := type(owner)) in (scf.ForOp, scf.WhileOp) and _sloted(owner):
            offset = 1 if kind is scf.ForOp else 0  # (the induction variable)
            if value.index >= offset:
                self.mark_slot(owner, value.index - offset)
                return
        self.mark(owner)

    def mark_slot(self, op: Operation, slot: int) -> None:
        self.mark(op)
        slots = self.slots.setdefault(id(op), set())
        if slot in slots:
            return
        slots.add(slot)
        if type(op) is scf.IfOp:
            for region in op.regions:
                for block in region.blocks:
                    self.mark_value(block.last_op.operands[slot])  # type: ignore[union-attr]
            return
        first = 3 if type(op) is scf.ForOp else 0  # (lower bound, upper bound, step)
        self.mark_value(op.operands[first + slot])
        body = op.regions[-1].block
        self.mark_value(body.last_op.operands[slot])  # type: ignore[union-attr]

    # -- propagation ----------------------------------------------------------------------
    def run(self) -> None:
        for op in _walk(self.body):
            self.classify(op)
        while self.work:
            op = self.work.pop()
            self.propagate(op)

    def classify(self, op: Operation) -> None:
        """Note the buffers the function allocates and mark the roots."""
        name = op_name(op)
        if name in ("memref.alloc", "memref.alloca"):
            ref = op.results[0]
            self.stores[id(ref)] = []
            for use in ref.uses:
                user, index = use.operation, use.index
                user_name = op_name(user)
                if user_name == "memref.store" and index == 1:
                    self.stores[id(ref)].append(user)
                elif not (
                    (user_name == "memref.load" and index == 0) or user_name == "memref.dealloc"
                ):
                    self.escaped.add(id(ref))
            return
        if type(op) in _LOOPS or _is_pure(op, name):
            return
        if name == "memref.store":
            ref = op.operands[1]
            if id(ref) in self.stores and id(ref) not in self.escaped:
                return  # live when something loads from the buffer
        elif name == "memref.dealloc":
            if id(op.operands[0]) in self.stores:
                return  # kept with its buffer
        elif name in ("scf.yield", "scf.condition"):
            if type(op.parent_op()) in _LOOPS:
                return  # live with their loop or branch (per slot)
        self.mark(op)

    def propagate(self, op: Operation) -> None:
        parent = op.parent_op()
        if parent is not None and op.parent_block() is not self.body:
            self.mark(parent)  # a live op in a region: the region's op runs
        if type(op) in _LOOPS:
            self.loop_is_live(op)
            return
        name = op_name(op)
        if name in ("scf.yield", "scf.condition") and type(parent) in _LOOPS:
            if name == "scf.condition":  # (forwarded values: the while's slots)
                self.mark_value(op.operands[0])
            return
        for value in op.operands:
            self.mark_value(value)
        if name == "memref.load":
            ref = op.operands[0]
            for store in self.stores.get(id(ref), ()):
                self.mark(store)
        if name in ("memref.alloc", "memref.alloca") and id(op.results[0]) in self.escaped:
            for store in self.stores[id(op.results[0])]:
                self.mark(store)

    def loop_is_live(self, op: Operation) -> None:
        """A live loop or branch runs: its bounds or condition are live; one that is not
        narrowed by slots keeps everything it carries."""
        if type(op) is scf.IfOp:
            self.mark_value(op.operands[0])
        elif type(op) is scf.ForOp:
            for value in op.operands[:3]:
                self.mark_value(value)
        else:
            condition = op.regions[0].block.last_op
            assert condition is not None
            self.mark(condition)
        if not _sloted(op):
            for value in op.operands:
                self.mark_value(value)
            for region in op.regions:
                for block in region.blocks:
                    assert block.last_op is not None
                    for value in block.last_op.operands:
                        self.mark_value(value)


def _sloted(op: Operation) -> bool:
    """Whether liveness follows `op`'s carried values one by one (else all are live with
    it): every `scf.if` and `scf.for`, an `scf.while` whose condition forwards its
    arguments in order (as `for_loop` and `while_loop` emit it)."""
    if type(op) is not scf.WhileOp:
        return True
    before, after = op.regions[0].block, op.regions[1].block
    condition = before.last_op
    assert condition is not None
    return len(before.args) == len(after.args) == len(op.results) and list(
        condition.operands[1:]
    ) == list(before.args)


def _may_have_dead_code(body: Block) -> bool:
    """Whether an op without effects or a loop or branch has an unused result, or a buffer
    is never loaded from: dead code has such an op (its last use), so the analysis (about
    ten times as slow per op) runs only then. (Most ops of a trace have one used result.)"""
    buffers = []
    op = body.first_op
    while op is not None:
        for r in op.results:
            if r.first_use is None:
                name = op_name(op)
                if type(op) in _LOOPS or _is_pure(op, name):
                    return True
        if op.regions:
            for region in op.regions:
                for block in region.blocks:
                    if _may_have_dead_code(block):
                        return True
        elif op.results and op_name(op) in ("memref.alloc", "memref.alloca"):
            buffers.append(op.results[0])
        op = op._next_op
    return any(all(op_name(u.operation) != "memref.load" for u in ref.uses) for ref in buffers)


# ----------------------------------------------------------------------------------------
# sweeping
# ----------------------------------------------------------------------------------------
def remove_dead_code(body: Block) -> int:
    """Remove the dead code of the function whose entry block is `body` (see the module's
    docstring); returns the number of ops removed (nested ones included)."""
    if not _may_have_dead_code(body):
        return 0
    liveness = _Liveness(body)
    liveness.run()
    live = liveness.live
    dead: list[Operation] = []
    narrowed: list[Operation] = []
    for op in _walk(body):
        parent = op.parent_op()
        if parent is not None and op.parent_block() is not body and id(parent) not in live:
            continue  # goes with its parent
        if id(op) in live:
            if type(op) in _LOOPS and _sloted(op):
                if len(liveness.slots.get(id(op), ())) < len(op.results):
                    narrowed.append(op)
            continue
        name = op_name(op)
        if name == "memref.dealloc" and id(op.operands[0]) in liveness.stores:
            if id(op.operands[0].owner) in live:  # type: ignore[union-attr]
                continue
        elif name in ("scf.yield", "scf.condition") and id(parent) in live:
            continue  # narrowed with its loop
        dead.append(op)
    if not dead and not narrowed:
        return 0
    removed = 0
    for op in dead:
        removed += 1 + sum(1 for region in op.regions for b in region.blocks for _ in _walk(b))
        op.parent_block().detach_op(op)  # type: ignore[union-attr]
    for op in dead:
        op.drop_all_references()
    # Terminators first, everywhere: a dropped slot of a nested loop or branch may be
    # yielded by its parent's terminator (an `else_if` is an scf.if in an else block), and
    # is only unused once that yield is gone. Then the ops, innermost first: a dropped
    # block argument of a parent may be the initial value of a nested op's dropped slot.
    for op in narrowed:
        _narrow_terminators(op, sorted(liveness.slots.get(id(op), ())))
    for op in reversed(narrowed):  # (their parents' regions move intact)
        _narrow(op, sorted(liveness.slots.get(id(op), ())))
    for op in dead:  # (every use of their results was in a dead op or a dropped slot)
        op.erase(drop_references=False)
    return removed


def _narrow_terminators(op: Operation, keep: list[int]) -> None:
    """The terminators of the loop or branch `op` yield only slots `keep`."""
    if type(op) is scf.IfOp:
        for region in op.regions:
            for block in region.blocks:
                _narrow_terminator(block, keep)
    elif type(op) is scf.ForOp:
        _narrow_terminator(op.regions[0].block, keep)
    else:
        _narrow_terminator(op.regions[0].block, keep, offset=1)
        _narrow_terminator(op.regions[1].block, keep)


def _narrow(op: Operation, keep: list[int]) -> None:
    """Replace the loop or branch `op`, whose terminators yield only slots `keep`
    (`_narrow_terminators`), by one that carries (returns) only those slots."""
    if type(op) is scf.IfOp:
        regions = [op.detach_region(r) for r in list(op.regions)]
        new: Operation = if_op(op.operands[0], [op.results[i].type for i in keep], *regions)
    elif type(op) is scf.ForOp:
        body = op.regions[0].block
        _narrow_args(body, keep, offset=1)
        new = for_op(*op.operands[:3], [op.operands[3 + i] for i in keep], op.detach_region(0))
    else:
        before, after = op.regions[0].block, op.regions[1].block
        _narrow_args(before, keep)
        _narrow_args(after, keep)
        regions = [op.detach_region(r) for r in list(op.regions)]
        new = while_op([op.operands[i] for i in keep], [op.results[i].type for i in keep], *regions)
    block = op.parent_block()
    assert block is not None
    block.insert_op_before(new, op)
    for position, i in enumerate(keep):
        op.results[i].replace_all_uses_with(new.results[position])
    block.detach_op(op)
    op.erase()  # (its dropped slots' results were used by dead ops only)


def _narrow_terminator(block: Block, keep: list[int], offset: int = 0) -> None:
    """Rebuild `block`'s terminator with its first `offset` operands and slots `keep`."""
    old = block.last_op
    assert old is not None
    operands = [*old.operands[:offset], *(old.operands[offset + i] for i in keep)]
    new = type(old).create(
        operands=operands, properties=dict(old.properties), attributes=dict(old.attributes)
    )
    block.insert_op_before(new, old)
    block.detach_op(old)
    old.erase()


def _narrow_args(block: Block, keep: list[int], offset: int = 0) -> None:
    """Erase the arguments of `block` after the first `offset` that are not in `keep`."""
    kept = {offset + i for i in keep}
    for arg in reversed(block.args[offset:]):
        if arg.index not in kept:
            block.erase_arg(arg)  # (its users were dead)
