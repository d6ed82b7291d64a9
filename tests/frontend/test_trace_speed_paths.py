"""The fast paths of tracing produce the IR the plain ones did.

- `ir.printer.module_text` must print exactly what xDSL's `str(module)` prints (it prints
  each kind of op once as a template);
- an element of an array argument read many times (`x[w]` in a loop over gates) is loaded
  once: every load of it sits at the same point, right after the array is final.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pennylane as qml
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, f64, i1, i64
from xdsl.ir import Block, Region

from cofactor.ir.builder import INDEX, IRBuilder, memref_type
from cofactor.ir.mlir15 import generic_op
from cofactor.ir.printer import module_text
from cofactor.jit import QJIT, qjit
from cofactor.launcher import BufferSpec


def _trace(fn, specs):
    tree = ("tuple", tuple("*" for _ in specs))
    return QJIT(fn)._trace(tree, tuple(specs), ())[0]


def test_module_text_matches_xdsl_on_awkward_ops():
    b = IRBuilder()
    block = Block(arg_types=[memref_type((3,), np.dtype(np.float64))])
    b.push(block)
    x = b.load(block.args[0], [b.index(0)])
    y = b.load(block.args[0], [b.index(2)])
    for value in (0.0, -0.0, math.nan, math.inf, -math.inf, 1e-300, 0.1, 1.0):
        b.const(value, f64)
    for value in (0, 1, -1, 2**62):
        b.const(value, i64)
    b.const(True, i1)
    b.const(False, i1)
    b.const(3, INDEX)
    b.generic("arith.remf", [x, y], f64)
    b.generic("arith.remf", [x, x], f64)  # one value twice
    b.generic("arith.remf", [y, x], f64)
    b.generic("arith.remf", [y, y], f64)
    # same number of distinct operands, used twice in different places
    i, j = b.index(0), b.index(1)
    cube = b.alloca(memref_type((2, 2, 2), np.dtype(np.float64)))
    for ids in ([i, j, i], [i, i, j], [j, i, i], [j, j, j], [i, j, i], [j, i, j]):
        b.load(cube, ids)
    b.insert(generic_op("quantum.gate", [x, b.const(0, i64)], [], {}))
    b.store(x, block.args[0], [b.index(1)])
    b.insert(func.ReturnOp())
    b.pop()
    fn = func.FuncOp("f", ([memref_type((3,), np.dtype(np.float64))], []), Region(block))
    module = ModuleOp([fn])
    assert module_text(module) == str(module)


def test_module_text_matches_xdsl_on_traced_programs():
    def classical(x, k):
        y = np.where(x > 0, np.sin(x) * x[0], x[1] ** 2)
        return np.sum(y) + k * x[2], np.cumsum(x)

    specs = [BufferSpec((4,), np.dtype(np.float64)), BufferSpec((), np.dtype(np.int64))]
    text = _trace(classical, specs)
    assert "memref.load" in text

    dev = qml.device("default.qubit", wires=3)

    @qml.qnode(dev)
    def circuit(x):
        for w in range(3):
            qml.RX(x[w], wires=w)
            qml.CNOT(wires=[w, (w + 1) % 3])
            qml.adjoint(qml.RZ)(x[w], wires=w)
            qml.ctrl(qml.RY, control=(w + 1) % 3)(x[0], wires=w)
        return qml.expval(qml.PauliZ(0) @ qml.PauliX(1)), qml.probs(wires=[0, 2])

    # the checks happen in `_trace` via module_text; compare it with xDSL's text as well
    from cofactor.ir import printer

    seen = []
    original = printer.module_text

    def checked(op):
        text = original(op)
        assert text == str(op)
        seen.append(text)
        return text

    from cofactor.ir import traced

    traced.module_text, saved = checked, traced.module_text
    try:
        _trace(circuit, [BufferSpec((3,), np.dtype(np.float64))])
        _trace(classical, specs)
    finally:
        traced.module_text = saved
    assert len(seen) == 2


def test_an_element_read_many_times_is_loaded_once():
    dev = qml.device("default.qubit", wires=2)

    @qml.qnode(dev)
    def circuit(x):
        for _ in range(5):
            qml.RX(x[0], wires=0)
            qml.RY(x[1], wires=1)
            qml.CNOT(wires=[0, 1])
        return qml.expval(qml.PauliZ(1))

    text = _trace(circuit, [BufferSpec((2,), np.dtype(np.float64))])
    assert text.count("memref.load") == 2

    x = np.array([0.3, -0.7])
    expected = qml.QNode(circuit.func, dev)(x)
    assert np.isclose(qjit(circuit)(x), expected)


def test_the_loads_of_an_argument_share_its_index_constants():
    """Each index value is one `arith.constant` per array, above every load of the array,
    whatever path loads (element reads, slices, complex elements) and in whatever order."""
    dev = qml.device("default.qubit", wires=2)

    @qml.qnode(dev)
    def circuit(x, z):
        for layer in (1, 0):
            for w in range(2):
                qml.RX(x[layer, w, 1], wires=w)
                qml.RY(x[layer, w, 0], wires=w)
        qml.RZ(np.real(z[1]) + np.sum(x[0, 1]), wires=0)
        return qml.expval(qml.PauliZ(0))

    specs = [BufferSpec((2, 2, 2), np.dtype(np.float64)), BufferSpec((2,), np.dtype(complex))]
    text = _trace(circuit, specs)
    body = text.split("func.func")[1]
    lines = [ln.strip() for ln in body.splitlines()]
    consts = [ln for ln in lines if ln.endswith(": index") and "arith.constant" in ln]
    loads = [i for i, ln in enumerate(lines) if "memref.load" in ln]
    # x: 0 and 1; z: 1 (the element) and 0, 1 (its real and imaginary parts)
    assert sorted(c.split("constant ")[1] for c in consts) == sorted(["0 : index", "1 : index"] * 2)
    assert len(loads) == 8 + 2
    for i in loads:  # every index a load uses is defined above it
        indices = lines[i].split("[")[1].split("]")[0].split(", ")
        defined = {ln.split(" =")[0] for ln in lines[:i] if " = " in ln}
        assert set(indices) <= defined, lines[i]

    x = np.linspace(-1.0, 1.0, 8).reshape(2, 2, 2)
    z = np.array([0.1 + 0.2j, -0.4 + 0.3j])
    expected = qml.QNode(circuit.func, dev)(x, z)
    assert np.isclose(qjit(circuit)(x, z), expected)


def test_generic_op_builds_what_xdsl_create_builds():
    from xdsl.dialects.builtin import UnregisteredOp

    from cofactor.ir.builder import quantum_attrs

    b = IRBuilder()
    block = Block(arg_types=[f64, i64])
    b.push(block)
    attrs = quantum_attrs(gate="RZ", num_params=1, num_wires=1, adjoint=True)
    for operands, results in (([], []), (list(block.args), []), (list(block.args), [f64, i64])):
        fast = generic_op("quantum.gate", operands, results, attrs)
        slow = UnregisteredOp.with_name("quantum.gate").create(
            operands=operands, result_types=results, attributes=attrs
        )
        assert fast.name == slow.name and fast.op_name == slow.op_name
        assert list(fast.operands) == list(slow.operands)
        assert [r.type for r in fast.results] == [r.type for r in slow.results]
        assert [(r.op, r.index) for r in fast.results] == [(fast, i) for i in range(len(results))]
        assert fast.attributes == slow.attributes
        assert list(fast.attributes) == list(slow.attributes)
        assert fast.properties == slow.properties and fast.location == slow.location
        assert fast.successors == slow.successors and fast.regions == slow.regions
        assert fast.parent is None and fast.next_op is None and fast.prev_op is None
        b.insert(fast)
        assert fast.parent is block
    # the uses are registered: the block argument is used by the two fast and two slow ops
    # that took it
    users = [u.operation for u in block.args[0].uses]
    assert len(users) == 4 and sum(1 for op in users if op.parent is block) == 2
    assert str(fast) == str(slow)


def test_simple_op_builds_what_xdsl_create_builds():
    from xdsl.dialects import arith, memref
    from xdsl.dialects.builtin import IntegerAttr

    from cofactor.ir.mlir15 import simple_op

    ref_type = memref_type((3,), np.dtype(np.float64))
    block = Block(arg_types=[ref_type, f64])
    ref, x = block.args
    value = IntegerAttr(2, INDEX)
    i = simple_op(arith.ConstantOp, [], [INDEX], {"value": value}).results[0]
    cases = [
        (arith.ConstantOp, [], [INDEX], {"value": value}),
        (memref.LoadOp, [ref, i], [f64], {}),
        (memref.StoreOp, [x, ref, i], [], {}),
        (memref.CopyOp, [ref, ref], [], {}),
    ]
    for cls, operands, results, props in cases:
        fast = simple_op(cls, operands, results, props)
        slow = cls.create(operands=operands, result_types=results, properties=props)
        assert type(fast) is type(slow) and list(fast.operands) == list(slow.operands)
        assert [r.type for r in fast.results] == [r.type for r in slow.results]
        assert [(r.op, r.index) for r in fast.results] == [(fast, i) for i in range(len(results))]
        assert fast.properties == slow.properties and list(fast.properties) == list(slow.properties)
        assert fast.attributes == slow.attributes and fast.location == slow.location
        assert fast.successors == slow.successors and fast.regions == slow.regions
        assert fast.parent is None and fast.next_op is None and fast.prev_op is None
        fast.verify()
        assert str(fast) == str(slow)
    # the uses are registered: `x` is stored by the fast and the slow store, `ref` used by
    # four ops each way; the use lists are linked both ways, newest first
    assert len(list(x.uses)) == 2
    for value in (x, ref):
        uses = list(value.uses)
        assert uses[0] is value.first_use and uses[0]._prev_use is None
        assert all(b._prev_use is a and a._next_use is b for a, b in itertools.pairwise(uses))
        assert all(u.operation.operands[u.index] is value for u in uses)


def test_the_cycle_collector_is_paused_during_a_trace_and_restored():
    import gc

    seen = []

    def f(x):
        seen.append(gc.isenabled())
        return x * 2.0

    assert gc.isenabled()
    _trace(f, [BufferSpec((), np.dtype(np.float64))])
    assert seen == [False] and gc.isenabled()

    def fails(x):
        raise ValueError("user error")

    try:
        _trace(fails, [BufferSpec((), np.dtype(np.float64))])
    except ValueError:
        pass
    assert gc.isenabled()
    gc.disable()  # a program that turned the collector off keeps it off
    try:
        _trace(f, [BufferSpec((), np.dtype(np.float64))])
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_reading_elements_of_an_argument_array_matches_numpy():
    def f(x):
        return x[0] + 2.0 * x[-1] + x[np.int64(1)] * x[0] + x[-3]

    x = np.array([0.5, -1.5, 2.25])
    assert np.isclose(qjit(f)(x), f(x))
    text = _trace(f, [BufferSpec((3,), np.dtype(np.float64))])
    assert text.count("memref.load") == 3  # x[0] and x[-3] are one element

    def out_of_range(x):
        return x[3]

    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 0 with size 3"):
        _trace(out_of_range, [BufferSpec((3,), np.dtype(np.float64))])


def test_reading_elements_of_a_small_nd_argument_matches_numpy_and_the_general_path():
    def f(x):
        return x[1, 2, 0] * x[-1, 0, 1] + x[0, np.int64(3), -2] - x[(1, -2, 1)] + x[1, 2, 0]

    x = np.arange(16, dtype=np.float64).reshape(2, 4, 2) / 7 - 1
    assert np.isclose(qjit(f)(x), f(x))
    spec = [BufferSpec((2, 4, 2), np.dtype(np.float64))]
    text = _trace(f, spec)
    assert text.count("memref.load") == 4  # x[1, 2, 0] is loaded once

    # the general path (a key that is not all integers) loads the same way
    def g(x):
        return x[1, 2][0] * x[-1, 0][1] + x[0, 3][0] - x[1, 2][1] + x[1, 2][0]

    assert np.isclose(qjit(g)(x), g(x))

    def out_of_range(x):
        return x[0, 4, 0]

    with pytest.raises(IndexError, match="index 4 is out of bounds for axis 1 with size 4"):
        _trace(out_of_range, spec)


def test_module_text_stays_exact_when_its_caches_carry_over_between_modules():
    # templates and attribute texts are kept from one module to the next: print two
    # modules whose ops share kinds (and differ in SSA names, values and -0.0 / 0.0)
    def module(values):
        b = IRBuilder()
        block = Block(arg_types=[memref_type((3,), np.dtype(np.float64))])
        b.push(block)
        for v in values:
            x = b.load(block.args[0], [b.index(v % 3)])
            b.store(x, block.args[0], [b.index(1)])
            b.const(float(v) * -0.0 if v % 2 else float(v), f64)
            b.insert(generic_op("quantum.gate", [x, b.const(v, i64)], [], {}))
        b.insert(func.ReturnOp())
        b.pop()
        fn = func.FuncOp("f", ([memref_type((3,), np.dtype(np.float64))], []), Region(block))
        return ModuleOp([fn])

    for values in ([0, 1, 2], [2, 0, 5, 1], [0, 1, 2]):
        m = module(values)
        assert module_text(m) == str(m)

    # past the shared caches' bounds, new templates and texts serve one module only
    from cofactor.ir import printer

    saved = printer._TEMPLATES_LIMIT, printer._ATTR_TEXT_LIMIT
    printer._TEMPLATES_LIMIT = printer._ATTR_TEXT_LIMIT = 0
    try:
        for values in ([7, 8, 9, 7], [9, 11, 3]):
            m = module(values)
            assert module_text(m) == str(m)
    finally:
        printer._TEMPLATES_LIMIT, printer._ATTR_TEXT_LIMIT = saved


def test_memref_types_are_the_ones_xdsl_constructor_makes():
    from xdsl.dialects.builtin import MemRefType

    from cofactor.ir.builder import _ELEMENT_TYPES

    for dtype, (elem, extra) in _ELEMENT_TYPES.items():
        for shape in [(), (3,), (2, 4, 2), (1, 0, 5)]:
            ours = memref_type(shape, dtype)
            xdsl = MemRefType(elem, [*shape, *extra])
            assert ours == xdsl and hash(ours) == hash(xdsl) and str(ours) == str(xdsl)


def test_integer_attributes_are_the_ones_xdsl_constructor_makes():
    from xdsl.dialects.builtin import IntegerAttr, i32
    from xdsl.utils.exceptions import VerifyException

    from cofactor.ir.builder import _new_int_attr

    for type_ in (i64, INDEX, i32, i1):
        for value in (0, 1, -1, 3, 2**31, -(2**63), 2**63 - 1, 2**63, 2**64 - 1):
            try:
                xdsl = IntegerAttr(value, type_)
            except VerifyException:
                with pytest.raises(VerifyException):
                    _new_int_attr(value, type_)
                continue
            ours = _new_int_attr(value, type_)
            assert ours == xdsl and hash(ours) == hash(xdsl) and str(ours) == str(xdsl)
            assert type(ours.value.data) is int


def test_functions_are_the_ones_xdsl_constructor_makes():
    from xdsl.dialects.builtin import FunctionType

    from cofactor.ir.builder import func_op, function_type

    types = [memref_type((2, 3), np.dtype(np.float64)), memref_type((), np.dtype(np.int64))]
    for inputs in ([], types, types[::-1]):
        ours, xdsl = function_type(inputs, types), FunctionType.from_lists(inputs, types)
        assert ours == xdsl and hash(ours) == hash(xdsl) and str(ours) == str(xdsl)
        blocks = [Block([func.ReturnOp()], arg_types=inputs) for _ in range(2)]
        mine = func_op("f", inputs, Region(blocks[0]))
        theirs = func.FuncOp("f", (inputs, []), Region(blocks[1]))
        assert list(mine.properties.items()) == list(theirs.properties.items())
        assert mine.attributes == theirs.attributes == {}
        assert str(mine) == str(theirs)
        mine.verify()


def test_modules_calls_returns_and_memory_ops_are_the_ones_xdsl_constructors_make():
    from xdsl.dialects import memref

    from cofactor.ir.builder import call_op, func_op, module_op, return_op

    ref_type = memref_type((2,), np.dtype(np.float64))
    pairs = []
    for build in ("ours", "xdsl"):
        block = Block(arg_types=[ref_type, f64])
        ref, x = block.args
        if build == "ours":
            b = IRBuilder()
            b.push(block)
            alloc = b.alloc(ref_type)
            b.insert(call_op("g", [alloc, x], [f64]))
            b.dealloc(alloc)
            b.insert(return_op(x))
            ops = [func_op("f", [ref_type, f64], Region(block))]
            module = module_op(ops)
        else:
            alloc = memref.AllocOp.get(f64, shape=[2])
            block.add_ops(
                [
                    alloc,
                    func.CallOp("g", [alloc.results[0], x], [f64]),
                    memref.DeallocOp.get(alloc),
                    func.ReturnOp(x),
                ]
            )
            ops = [func.FuncOp("f", ([ref_type, f64], []), Region(block))]
            module = ModuleOp(ops)
        pairs.append((module, list(module.walk())))
    (mine, my_ops), (theirs, their_ops) = pairs
    assert [type(op) for op in my_ops] == [type(op) for op in their_ops]
    for a, b in zip(my_ops, their_ops, strict=True):
        assert list(a.properties.items()) == list(b.properties.items())
        assert a.attributes == b.attributes and a.location == b.location
        assert [r.type for r in a.results] == [r.type for r in b.results]
        assert len(a.operands) == len(b.operands) and len(a.regions) == len(b.regions)
        assert all(r.parent is a for r in a.regions)
        # each operand knows its use by the op (xDSL's use lists)
        uses = {(u.operation, u.index) for v in a.operands for u in v.uses}
        assert all((a, i) in uses for i in range(len(a.operands)))
    assert str(mine) == str(theirs)
    mine.ops.first.body.block.ops.first.verify()  # (the alloc; @g is not declared)
    # an op's region is attached once
    with pytest.raises(ValueError, match="already attached"):
        func_op("h", [], mine.regions[0])


def test_link_op_links_as_xdsl_insertion_does():
    from xdsl.dialects import scf
    from xdsl.dialects.builtin import IntegerAttr

    from cofactor.ir.builder import link_op

    def const(i):
        return generic_op("test.c", [], [i64], {"v": IntegerAttr(i, i64)})

    ours, theirs = Block(), Block()
    plan = [None, None, 0, None, 1, 3]  # insert before the op made at that step (or append)
    made = {"ours": [], "theirs": []}
    for step, before in enumerate(plan):
        a, b = const(step), const(step)
        link_op(a, ours, None if before is None else made["ours"][before])
        if before is None:
            theirs.add_op(b)
        else:
            theirs.insert_op_before(b, made["theirs"][before])
        made["ours"].append(a)
        made["theirs"].append(b)
    order = [op.attributes["v"].value.data for op in ours.ops]
    assert order == [op.attributes["v"].value.data for op in theirs.ops]
    assert order[::-1] == [op.attributes["v"].value.data for op in reversed(list(ours.ops))]
    assert ours.last_op is made["ours"][3] and all(op.parent is ours for op in ours.ops)
    with pytest.raises(ValueError, match="already attached"):
        link_op(made["ours"][0], theirs, None)
    inner = Block([scf.YieldOp()])
    region_op = scf.IfOp(made["ours"][0].results[0], [], Region(inner), Region(Block()))
    with pytest.raises(ValueError, match="contained in the operation"):
        link_op(region_op, inner, None)


def test_the_small_array_bound_of_tracer_getitem_is_indexing_s():
    from cofactor.tracing import tracer
    from cofactor.tracing.array_loops import ELEMENTWISE_MAX

    assert tracer._SMALL_ARRAY_MAX == ELEMENTWISE_MAX


@pytest.mark.parametrize("wires", [3, ["a", 7, "c"]])
def test_the_plain_gate_path_emits_what_the_general_one_does(monkeypatch, wires):
    from cofactor.tracing import qnode as qnode_module

    labels = list(range(3)) if wires == 3 else wires
    a, b, c = labels

    def make():
        @qml.qnode(qml.device("lightning.qubit", wires=wires))
        def circuit(x):
            qml.RX(x[0], wires=a)
            qml.RY(x[1], wires=c)
            qml.CNOT(wires=[a, b])
            qml.CZ(wires=[b, c])
            qml.Toffoli(wires=[a, b, c])
            qml.adjoint(qml.RX(x[2], wires=b))
            qml.ctrl(qml.RY(x[1], wires=a), control=c)
            qml.ctrl(qml.PauliX(b), control=a, control_values=[0])
            qml.Identity(a)
            qml.GlobalPhase(x[0])
            qml.PhaseShift(0.25, wires=b)
            qml.CRX(x[2], wires=[b, c])
            qml.Rot(x[0], x[1], 0.5, wires=c)
            qml.SWAP(wires=[c, a])
            qml.RX(np.float64(0.75), wires=a)
            return qml.expval(qml.PauliZ(a) @ qml.PauliX(c))

        return circuit

    spec = [BufferSpec((3,), np.dtype(np.float64))]
    fast = _trace(make(), spec)
    monkeypatch.setattr(qnode_module, "_PLAIN_GATE_CLASSES", {})
    monkeypatch.setattr(qnode_module, "_plain_gate_class", lambda op: 0)
    general = _trace(make(), spec)
    assert fast == general
    x = np.array([0.3, -1.1, 2.0])
    expected = make()(x)  # PennyLane itself (lightning.qubit)
    monkeypatch.undo()
    assert np.isclose(qjit(make())(x), expected)


def test_a_cached_first_call_imports_no_module(tmp_path):
    """The first call of a process whose library is in the disk cache imports nothing: every
    module the trace, the key and the load need is imported with cofactor (an import in the
    call cost 0.3 ms of its pyc, and 5 ms when no pyc can be written). Run twice in new
    processes: the first fills the cache, the second loads from it."""
    import os
    import subprocess
    import sys

    script = (
        "import sys, pennylane as qml, numpy as np, cofactor\n"
        "@cofactor.qjit\n"
        "@qml.qnode(qml.device('lightning.qubit', wires=2))\n"
        "def f(x):\n"
        "    qml.RX(x[0], wires=0)\n"
        "    qml.CNOT(wires=[0, 1])\n"
        "    return qml.expval(qml.PauliZ(1))\n"
        "before = set(sys.modules)\n"
        "value = f(np.array([0.3]))\n"
        "print(f._last.library.from_cache, abs(value - np.cos(0.3)) < 1e-12,\n"
        "      sorted(set(sys.modules) - before))\n"
    )
    env = {**os.environ, "COFACTOR_CACHE_DIR": str(tmp_path), "COFACTOR_DISABLE_CACHE": "0"}
    outs = [
        subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(2)
    ]
    assert outs[1] == "True True []", outs
