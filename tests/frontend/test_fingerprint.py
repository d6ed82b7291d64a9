"""The disk cache's key of a traced module (`cofactor.ir.fingerprint`): as complete as the
module's text (two programs that differ in an op, its operands, a type, an attribute or
property, a region, or the order of ops get different keys), the same in every process, and
the cached first call never prints the module."""

from __future__ import annotations

import enum
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pennylane as qml
import pytest
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    FunctionType,
    IndexType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    Signedness,
    StringAttr,
    SymbolRefAttr,
    UnitAttr,
    UnregisteredOp,
    f32,
    f64,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Data, ParametrizedAttribute, Region

from cofactor import cond, for_loop, qjit
from cofactor.ir import fingerprint, traced
from cofactor.ir.fingerprint import attribute_token, module_fingerprint
from cofactor.jit import QJIT
from cofactor.launcher import BufferSpec

F64 = BufferSpec((), np.dtype(np.float64))
I64 = BufferSpec((), np.dtype(np.int64))
V3 = BufferSpec((3,), np.dtype(np.float64))
V4 = BufferSpec((4,), np.dtype(np.float64))
FRONTEND = Path(__file__).resolve().parents[2] / "frontend"


def key_and_text(fn, *specs):
    tree = ("tuple", tuple("*" for _ in specs))
    module = QJIT(fn)._trace_module(tree, specs, ())[0]
    return module.fingerprint, module.text()


def _first(x, y):
    a = x * 2.0
    b = y * 3.0
    return a, b


def _second(x, y):
    b = y * 3.0
    a = x * 2.0
    return a, b


dev = qml.device("default.qubit", wires=2)


def _circuit(gate, wire, observable):
    @qml.qnode(dev)
    def circuit(x):
        gate(x, wires=wire)
        qml.CNOT(wires=[0, 1])
        return qml.expval(observable(1))

    return circuit


def _branches(add_first):
    def fn(x, y):
        @cond(x > 0.0)
        def branch():
            return x + y if add_first else x - y

        @branch.otherwise
        def branch():
            return x - y if add_first else x + y

        return branch()

    return fn


#: pairs of programs that differ in one thing each
PAIRS = {
    "op": (lambda x, y: x + y, lambda x, y: x - y, (F64, F64)),
    "operand order": (lambda x, y: x - y, lambda x, y: y - x, (F64, F64)),
    "same operand twice": (lambda x, y: x - y, lambda x, y: x - x + y * 0, (F64, F64)),
    "constant": (lambda x, y: x * 2.0 + y, lambda x, y: x * 3.0 + y, (F64, F64)),
    "constant's last bit": (
        lambda x, y: x * 0.1 + y,
        lambda x, y: x * float(np.nextafter(0.1, 1.0)) + y,
        (F64, F64),
    ),
    "integer constant": (lambda x, y: x + 1, lambda x, y: x + 2, (I64, I64)),
    "comparison (a property)": (
        lambda x, y: (x < y) * 1.0,
        lambda x, y: (x > y) * 1.0,
        (F64, F64),
    ),
    "order of ops": (_first, _second, (F64, F64)),
    "region": (_branches(True), _branches(False), (F64, F64)),
}


def _loop(n):
    def fn(x, y):
        @for_loop(0, n, 1)
        def body(i, acc):
            return acc * x

        return body(y)

    return fn


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_programs_that_differ_in_one_thing_get_different_keys(name):
    f, g, specs = PAIRS[name]
    key_f, text_f = key_and_text(f, *specs)
    key_g, text_g = key_and_text(g, *specs)
    assert text_f != text_g  # (the pair really differs)
    assert key_f != key_g


def test_types_shapes_loop_bounds_and_gates_change_the_key():
    programs = {
        "f64": key_and_text(lambda x, y: x * y, F64, F64),
        "i64": key_and_text(lambda x, y: x * y, I64, I64),
        "3": key_and_text(lambda x, y: x * y, V3, V3),
        "4": key_and_text(lambda x, y: x * y, V4, V4),
        "loop 3": key_and_text(_loop(3), F64, F64),
        "loop 4": key_and_text(_loop(4), F64, F64),
        "RX": key_and_text(_circuit(qml.RX, 0, qml.PauliZ), F64),
        "RY": key_and_text(_circuit(qml.RY, 0, qml.PauliZ), F64),
        "wire 1": key_and_text(_circuit(qml.RX, 1, qml.PauliZ), F64),
        "PauliX": key_and_text(_circuit(qml.RX, 0, qml.PauliX), F64),
    }
    keys = {key for key, _ in programs.values()}
    texts = {text for _, text in programs.values()}
    assert len(keys) == len(texts) == len(programs)


def test_the_same_program_gets_the_same_key():
    first = key_and_text(_circuit(qml.RX, 0, qml.PauliZ), F64)
    again = key_and_text(_circuit(qml.RX, 0, qml.PauliZ), F64)
    assert first == again
    # a different Python function with the same program: the same key (the key is the
    # program, not the code that made it)
    assert (
        key_and_text(lambda a, b: a + b, F64, F64)[0]
        == key_and_text(lambda x, y: x + y, F64, F64)[0]
    )


CHILD = """
import numpy as np, pennylane as qml
from cofactor.jit import QJIT
from cofactor.launcher import BufferSpec
dev = qml.device("default.qubit", wires=2)
@qml.qnode(dev)
def circuit(x):
    qml.RX(x[0] * 0.1, wires=0)
    qml.CNOT(wires=[0, 1])
    return qml.expval(qml.PauliZ(1))
spec = BufferSpec((3,), np.dtype(np.float64))
print(QJIT(circuit)._trace_module(("tuple", ("*",)), (spec,), ())[0].fingerprint)
"""


def test_the_key_is_the_same_in_every_process():
    keys = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(FRONTEND)}
        proc = subprocess.run(
            [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True
        )
        keys.add(proc.stdout.strip())
    assert len(keys) == 1
    assert len(keys.pop()) == 64


def _module(const, *, hint=None, attrs=None):
    block = Block(arg_types=[f64])
    c = arith.ConstantOp(const)
    mul = arith.MulfOp(block.args[0], c)
    if hint is not None:
        mul.result.name_hint = hint
    block.add_ops([c, mul, func.ReturnOp(mul)])
    fn = func.FuncOp("f", ([f64], [f64]), Region(block))
    if attrs:
        fn.attributes.update(attrs)
    return ModuleOp([fn])


def test_module_level_differences_and_what_is_left_out():
    base = module_fingerprint(_module(FloatAttr(2.0, f64)))
    assert base == module_fingerprint(_module(FloatAttr(2.0, f64)))
    assert base != module_fingerprint(_module(FloatAttr(-2.0, f64)))
    assert base != module_fingerprint(_module(FloatAttr(2.0, f64), attrs={"x": StringAttr("")}))
    # SSA names do not reach the compiled program (MLIR's parser drops them)
    assert base == module_fingerprint(_module(FloatAttr(2.0, f64), hint="y"))
    # text spliced into the module counts, with its boundaries
    module = _module(FloatAttr(2.0, f64))
    assert module_fingerprint(module, ["ab"]) != module_fingerprint(module, ["a", "b"])
    assert module_fingerprint(module, ["ab"]) != module_fingerprint(module)


def test_attribute_tokens_tell_values_apart():
    attributes = [
        IntegerType(64),
        IntegerType(64, Signedness.UNSIGNED),
        IntegerType(64, Signedness.SIGNED),
        IntegerType(32),
        FloatAttr(1.0, f64),
        FloatAttr(1.0, f32),
        FloatAttr(-0.0, f64),
        FloatAttr(0.0, f64),
        IntegerAttr(1, i64),
        IntegerAttr(1, i32),
        IntegerAttr(-1, i64),
        StringAttr("a,b"),
        StringAttr("a"),
        ArrayAttr([StringAttr("a,b")]),
        ArrayAttr([StringAttr("a"), StringAttr("b")]),
        ArrayAttr([]),
        DictionaryAttr({"a": StringAttr("b")}),
        DictionaryAttr({"b": StringAttr("a")}),
    ]
    tokens = [attribute_token(a) for a in attributes]
    assert len(set(tokens)) == len(attributes)
    assert attribute_token(FloatAttr(1.0, f64)) == tokens[4]


def _reference_token(value: object) -> str:
    """The token grammar of `cofactor.ir.fingerprint` (its docstring), written plainly."""
    cls = type(value)
    name = f"{cls.__module__}.{cls.__qualname__}"
    if isinstance(value, ParametrizedAttribute):
        tokens = [_reference_token(p) for p in value.parameters]
        return f"{name}<{value.name}>({len(tokens)}{''.join(f'|{len(t)}:{t}' for t in tokens)})"
    if isinstance(value, Data):
        inner = _reference_python(value.data)
        if inner is not None:
            return f"{name}<{value.name}>[{inner}]"
    if isinstance(value, Attribute):
        return f"{name}!{fingerprint._printed(value)!r}"
    inner = _reference_python(value)
    return inner if inner is not None else f"?{fingerprint._printed(value)!r}"


def _reference_python(value: object) -> str | None:
    if type(value) in (int, float, str, bytes, bool) or value is None:
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, Attribute):
        return _reference_token(value)
    if isinstance(value, enum.Enum):
        return f"{type(value).__module__}.{type(value).__qualname__}.{value.name}"
    if type(value) in (tuple, list):
        tokens = [_reference_token(v) for v in value]
        seq = f"({len(tokens)}{''.join(f'|{len(t)}:{t}' for t in tokens)})"
        return type(value).__name__ + seq
    if type(value) is dict:
        tokens = [_reference_token(x) for item in value.items() for x in item]
        return f"dict({len(tokens)}{''.join(f'|{len(t)}:{t}' for t in tokens)})"
    return None


def test_attribute_tokens_follow_the_grammar():
    # the token code writes the common cases out by hand: it must say what the grammar says
    attributes = [
        IntegerAttr(3, i64),
        IntegerAttr(-7, IndexType()),
        IntAttr(5),
        StringAttr("quantum.gate"),
        StringAttr('it\'s "quoted"'),
        ArrayAttr([IntegerAttr(1, i32), StringAttr("x")]),
        DictionaryAttr({"a": IntegerAttr(1, i64)}),
        FloatAttr(0.1, f64),
        FloatAttr(-0.0, f32),
        MemRefType(f64, [2, 4, 2]),
        FunctionType.from_lists([MemRefType(f64, [3])], [f64]),
        IntegerType(8, Signedness.UNSIGNED),
        UnitAttr(),
        SymbolRefAttr("circuit_1"),
        DenseArrayBase.from_list(i64, [1, 2, 3]),
        IntegerAttr(1, i1),
    ]
    for attr in attributes:
        expected = _reference_token(attr)
        fingerprint._TOKENS.pop(id(attr), None)
        assert fingerprint.attribute_token(attr) == expected, attr
        assert fingerprint.attribute_token(attr) == expected  # (cached by identity)


def test_a_cached_first_call_does_not_print_the_module(monkeypatch):
    def build():
        @qml.qnode(dev)
        def cached_circuit(x):
            qml.RY(x * 0.7, wires=0)
            qml.CNOT(wires=[0, 1])
            return qml.expval(qml.PauliZ(1))

        return cached_circuit

    fresh = qjit(build())
    expected = fresh(0.4)  # compiled and stored in the disk cache
    assert fresh.mlir

    def refuse(module):
        raise AssertionError("the module was printed")

    again = qjit(build())
    monkeypatch.setattr(traced, "module_text", refuse)
    assert again(0.4) == pytest.approx(expected)  # loaded from the cache by fingerprint
    assert again._last.library.from_cache
    with pytest.raises(AssertionError, match="printed"):
        _ = again.mlir  # printed only when asked for
    monkeypatch.undo()
    assert again.mlir == fresh.mlir
    assert expected == pytest.approx(qml.QNode(build().func, dev)(0.4))


def _ops_module(*ops):
    block = Block()
    block.add_ops(ops)
    return ModuleOp(Region(block))


def test_ops_that_share_attribute_objects_keep_their_own_heads():
    # The walk writes the head of a kind of op once, keyed by the identities of its
    # attribute objects; ops that hold the same objects differently are different kinds
    op = UnregisteredOp.with_name("test.op")
    a, b = StringAttr("a"), StringAttr("b")

    name = StringAttr("test.op")

    def make(props=None, attrs=None, results=()):
        made = op.create(properties=props or {}, result_types=results)
        made.attributes = {**(attrs or {}), "op_name__": name}  # (one object for all)
        return made

    variants = [
        [make(props={"x": a}), make(props={"x": a})],
        [make(props={"x": a}), make(attrs={"x": a})],  # a property, then an attribute
        [make(props={"x": a}), make(props={"y": a})],  # another name
        [make(props={"x": a}), make(props={"x": a, "y": b})],
        [make(props={"x": a}), make(props={"x": a}, attrs={"y": b})],
        [make(props={"x": a}), make(props={"x": a}, results=[i64])],
        [make(), make(results=[i64])],
        [make(), make(results=[i64, i64])],
        [make(), make(attrs={"x": a})],
    ]
    keys = [module_fingerprint(_ops_module(*ops)) for ops in variants]
    assert len(set(keys)) == len(keys)
    # (and the same ops again: the same key)
    assert keys[1] == module_fingerprint(_ops_module(make(props={"x": a}), make(attrs={"x": a})))
