"""qjit's calling conventions and options, as in Catalyst (and JAX): defaults stay Python
values, static_argnums/static_argnames, `user_function` is the QNode, Catalyst's keywords."""

from __future__ import annotations

import io

import numpy as np
import pennylane as qml
import pytest

import cofactor
from cofactor import CompileError, qjit


# ---- defaults are Python values, not traced --------------------------------------------------
def test_default_argument_stays_a_python_value():
    @qjit
    def c(x, flag=False):
        if flag:  # a traced bool here would raise (Python `if` on a traced value)
            return x * 2
        return x + 1

    assert c(0.1) == pytest.approx(1.1)
    assert c.compile_count == 1


def test_passed_keyword_is_traced_and_defaults_are_part_of_the_key():
    @qjit
    def f(x, y=2.0, *, scale=3):
        return x * y * scale

    assert f(1.0) == 6.0
    assert f(1.0, 4.0) == 12.0  # y given: traced
    assert f(1.0, 5.0) == 15.0  # same signature, no recompilation
    assert f.compile_count == 2
    assert f(1.0, scale=10) == 20.0  # scale given by keyword: traced
    assert f(1.0, scale=11) == 22.0
    assert f.compile_count == 3


def test_default_used_for_python_control_flow_in_a_qnode():
    dev = qml.device("default.qubit", wires=2)

    def circuit(x, layers=2, entangle=True):
        for _ in range(layers):
            qml.RX(x, 0)
            if entangle:
                qml.CNOT([0, 1])
        return qml.expval(qml.Z(1))

    ref = qml.QNode(circuit, dev)
    compiled = qjit(qml.QNode(circuit, dev))
    assert compiled(0.4) == pytest.approx(ref(0.4))


def test_keyword_only_parameters_are_not_dropped():
    @qjit
    def f(x, *, k=1.0):
        return x + k

    assert f(1.0) == 2.0
    assert f(1.0, k=5.0) == 6.0


# ---- static_argnames / static_argnums -------------------------------------------------------
def test_static_argnames_by_keyword_and_by_position():
    @qjit(static_argnames="n")
    def f(x, n):
        for _ in range(n):  # a Python loop needs a static n
            x = x * 2
        return x

    assert f(1.0, n=3) == 8.0
    assert f(1.0, 3) == 8.0  # the same static value by position: same compiled version
    assert f.compile_count == 1
    assert f(1.0, n=4) == 16.0
    assert f.compile_count == 2


def test_static_argnames_with_static_argnums():
    @qjit(static_argnums=1, static_argnames=("mode",))
    def f(x, n, mode="double"):
        y = x
        for _ in range(n):
            y = y * 2 if mode == "double" else y * 3
        return y

    assert f(1.0, 2) == 4.0
    assert f(1.0, 2, mode="triple") == 9.0
    assert f(1.0, n=2, mode="triple") == 9.0  # static_argnums=1 is static by name too
    assert f.static_argnums == (1, 2)  # names merged into positions, as in Catalyst
    assert set(f.static_argnames) == {"n", "mode"}


def test_static_argnames_unknown_name_is_a_value_error():
    with pytest.raises(ValueError, match="invalid argname {'m'}"):
        qjit(lambda x, n: x, static_argnames="m")
    with pytest.raises(TypeError, match="static_argnames"):
        qjit(lambda x, n: x, static_argnames=1)


def test_static_argnums_on_var_positional_function():
    @qjit(static_argnums=1)
    def f(*args):
        x, n = args
        for _ in range(n):
            x = x + 1.0
        return x

    assert f(0.5, 3) == 3.5
    assert f(0.5, 4) == 4.5
    assert f.compile_count == 2
    with pytest.raises(
        CompileError, match=r"static_argnums=1 is beyond the valid range of \[0, 1\)"
    ):
        f(0.5)


def test_unhashable_static_value_names_the_argument():
    f = qjit(lambda x, opts: x, static_argnames="opts")
    with pytest.raises(
        CompileError, match=r"static argument 1 \('opts'\) of <lambda> must be hashable"
    ):
        f(1.0, opts=[1, 2])


def test_wires_and_operators_as_static_arguments():
    dev = qml.device("default.qubit", wires=3)

    def circuit(x, wires, op):
        qml.RX(x, wires[0])
        qml.CNOT(wires=wires)
        qml.apply(op)
        return qml.expval(qml.Z(wires[1]))

    compiled = qjit(qml.QNode(circuit, dev), static_argnums=(1, 2))
    ref = qml.QNode(circuit, dev)
    for wires, op in [(qml.wires.Wires([0, 2]), qml.X(2)), (qml.wires.Wires([1, 0]), qml.Y(0))]:
        assert compiled(0.3, wires, op) == pytest.approx(ref(0.3, wires, op))
    assert compiled.compile_count == 2
    assert compiled(0.5, qml.wires.Wires([0, 2]), qml.X(2)) == pytest.approx(
        ref(0.5, qml.wires.Wires([0, 2]), qml.X(2))
    )
    assert compiled.compile_count == 2  # equal Wires and operators hit the cache


# ---- user_function is the QNode ---------------------------------------------------------------
def _qnode():
    dev = qml.device("default.qubit", wires=2)

    @qml.qnode(dev)
    def circuit(x):
        qml.RX(x, 0)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(1))

    return circuit


def test_user_function_is_the_qnode():
    circuit = _qnode()
    compiled = qjit(circuit)
    assert compiled.user_function is circuit
    assert compiled.original_function is circuit
    assert compiled.__name__ == "circuit"
    assert compiled(0.3) == pytest.approx(circuit(0.3))


def test_pennylane_draw_matrix_and_compile_pipeline_on_compiled_qnode():
    circuit = _qnode()
    compiled = qjit(qml.transforms.cancel_inverses(circuit))
    assert qml.draw(compiled)(0.3) == qml.draw(compiled.user_function)(0.3)
    assert "RX(0.30)" in qml.draw(compiled)(0.3)
    np.testing.assert_allclose(
        qml.matrix(compiled, wire_order=[0, 1])(0.3),
        qml.matrix(qml.transforms.cancel_inverses(circuit), wire_order=[0, 1])(0.3),
    )
    pipeline = qml.workflow.get_compile_pipeline(compiled)(0.3)
    assert "cancel_inverses" in repr(pipeline)


# ---- Catalyst's options ---------------------------------------------------------------------
def test_catalyst_default_options_are_accepted():
    f = qjit(
        lambda x: x + 1,
        autograph=False,
        async_qnodes=False,
        target="binary",
        keep_intermediate=False,
        use_nameloc=False,
        verbose=False,
        logfile=None,
        pipelines=None,
        static_argnums=None,
        static_argnames=None,
        abstracted_axes=None,
        disable_assertions=False,
        seed=None,
        circuit_transform_pipeline=None,
        pass_plugins=None,
        dialect_plugins=None,
        capture="global",
        skip_preprocess=False,
        collect_decomp_rules=True,
    )
    assert f(1.0) == 2.0
    assert qjit(lambda x: x * 2, capture=False)(2.0) == 4.0


@pytest.mark.parametrize(
    "option, value, exc, message",
    [
        ("target", "jaxpr", ValueError, "target='jaxpr' is not supported.*'binary'"),
        ("capture", True, NotImplementedError, "program capture is not supported by cofactor"),
        ("capture", "yes", ValueError, "capture='yes'"),
        ("pipelines", [("p", ["canonicalize"])], NotImplementedError, "option pipelines="),
        ("circuit_transform_pipeline", {"cancel_inverses": {}}, NotImplementedError, "transforms"),
        ("pass_plugins", ["p.so"], NotImplementedError, "pass_plugins"),
        ("no_such_option", 1, TypeError, "unexpected keyword argument.*'no_such_option'"),
        # Catalyst's check (before: 1.5 truncated to 1, the others accepted)
        ("seed", -1, ValueError, "Seed must be an unsigned 32-bit integer"),
        ("seed", 2**32, ValueError, "Seed must be an unsigned 32-bit integer"),
        ("seed", 1.5, ValueError, "Seed must be an unsigned 32-bit integer"),
        ("seed", True, ValueError, "Seed must be an unsigned 32-bit integer"),
    ],
)
def test_unsupported_option_values_are_named(option, value, exc, message):
    with pytest.raises(exc, match=message):
        qjit(lambda x: x, **{option: value})


def test_semantically_neutral_options_run_the_same():
    f = qjit(lambda x: x * 3, async_qnodes=True, disable_assertions=True, use_nameloc=True)
    assert f(2.0) == 6.0


def test_target_mlir_traces_ahead_of_time_without_compiling():
    @qjit(target="mlir")
    def f(x: float):
        return x * 2

    assert "func.func @f" in f.mlir
    assert f.compile_count == 0
    assert f(2.0) == 4.0  # a call compiles it, as in Catalyst
    assert f.compile_count == 1


def test_verbose_reports_each_compilation_to_logfile():
    log = io.StringIO()
    f = qjit(lambda x: x + 1, verbose=True, logfile=log)
    f(1.0)
    f(2.0)
    f(np.ones(2))
    lines = log.getvalue().splitlines()
    assert len(lines) == 2
    assert "compiled <lambda> for (float64[])" in lines[0]
    assert "float64[2]" in lines[1]


def test_pennylane_qjit_passes_options_through():
    @qml.qjit(compiler="cofactor", static_argnames="n")
    def f(x, n):
        return x * n

    assert f(2.0, n=3) == 6.0
    assert isinstance(f, cofactor.QJIT)


# ---- autograph=True (diastatic-malt) ---------------------------------------------------------
def test_autograph_if_on_traced_value():
    @qjit(autograph=True)
    def f(x):
        if x > 1.0:
            y = x * 2
            z = 1.0
        elif x > 0.0:
            y = x + 10
            z = 2.0
        else:
            y = -x
            z = 3.0
        return y * z

    for x in (2.0, 0.5, -3.0):
        expected = (x * 2 * 1.0) if x > 1 else (x + 10) * 2.0 if x > 0 else -x * 3.0
        assert f(x) == pytest.approx(expected)
    assert f.compile_count == 1  # one compiled program, branching at run time


def test_autograph_return_inside_if():
    @qjit(autograph=True)
    def f(x):
        if x < 0:
            return -x
        return x

    assert f(-2.0) == 2.0
    assert f(3.0) == 3.0


def test_autograph_for_over_traced_range_and_while():
    @qjit(autograph=True)
    def f(n, x):
        s = 0.0
        for i in range(1, n):
            s = s + i * x
        while s < 100.0:
            s = s * 2
        return s

    def ref(n, x):
        s = 0.0
        for i in range(1, n):
            s = s + i * x
        while s < 100.0:
            s = s * 2
        return s

    for n, x in [(4, 1.0), (10, 0.5), (3, 7.0)]:
        assert f(n, x) == pytest.approx(ref(n, x))
    assert f.compile_count == 1


def test_autograph_python_values_keep_python_control_flow():
    @qjit(autograph=True)
    def f(x, layers=3):
        for _ in range(layers):  # a Python range: unrolled
            x = x * 2
        if layers > 2:  # a Python bool: a Python if
            x = x + 1
        return x

    assert f(1.0) == 9.0


def test_autograph_qnode_matches_pennylane():
    dev = qml.device("default.qubit", wires=2)

    def circuit(x, n):
        for i in range(n):
            qml.RX(x * (i + 1), 0)
        if x > 0.5:
            qml.CNOT([0, 1])
        else:
            qml.Hadamard(1)
        return qml.expval(qml.Z(0) @ qml.Z(1))

    compiled = qjit(qml.QNode(circuit, dev), autograph=True)
    ref = qml.QNode(circuit, dev)
    for x, n in [(0.3, 3), (0.7, 2), (0.9, 0)]:
        assert compiled(x, n) == pytest.approx(ref(x, n))
    assert compiled.compile_count == 1
    assert isinstance(compiled.user_function, qml.QNode)
    assert compiled.original_function.func is circuit


def test_autograph_variable_defined_in_one_branch_is_named():
    @qjit(autograph=True)
    def f(x):
        if x > 0:
            y = x
        return y  # noqa: F821 (undefined when x <= 0)

    with pytest.raises(CompileError, match="'y' is not defined on every path"):
        f(1.0)


def test_without_autograph_python_if_on_traced_value_points_to_cond():
    @qjit
    def f(x):
        if x > 1:
            return x
        return -x

    with pytest.raises(CompileError, match="cofactor.cond"):
        f(2.0)


# ---- pure_callback with dict results ---------------------------------------------------------
def test_pure_callback_returning_a_dict():
    @cofactor.pure_callback(result_type={"mean": float, "spread": cofactor.ShapeDtype((2,), float)})
    def stats(x):
        # keys in another order than declared: matched by key
        return {"spread": np.array([x.min(), x.max()]), "mean": float(np.mean(x))}

    @qjit
    def f(x):
        d = stats(x)
        return d["mean"] * 2, d["spread"]

    mean2, spread = f(np.array([1.0, 2.0, 6.0]))
    assert mean2 == 6.0
    np.testing.assert_array_equal(spread, [1.0, 6.0])


def test_pure_callback_dict_with_wrong_keys_is_named():
    @cofactor.pure_callback(result_type={"a": float})
    def bad(x):
        return {"b": x}

    @qjit
    def f(x):
        return bad(x)["a"]

    with pytest.raises(TypeError, match=r"expected a dict with keys \['a'\].*got \['b'\]"):
        f(1.0)


# ---- returning operators ---------------------------------------------------------------------
def test_compiled_function_returns_operators():
    @qjit
    def f(x):
        h = qml.Hamiltonian([x, 0.5], [qml.Z(0), qml.X(1) @ qml.Y(2)])
        return qml.RX(x * 2, 0), {"h": h}

    op, d = f(0.3)
    assert qml.equal(op, qml.RX(0.6, 0))
    expected = qml.Hamiltonian([0.3, 0.5], [qml.Z(0), qml.X(1) @ qml.Y(2)])
    np.testing.assert_allclose(qml.matrix(d["h"]), qml.matrix(expected))
    assert d["h"].wires == expected.wires


@pytest.mark.parametrize("name", ["step", "exp", "random", "malloc", "cf_rt_expval"])
def test_function_named_like_a_c_or_runtime_symbol(name):
    """A qjit function called `step` used to call glibc's `step` (and crash), one called
    `exp` itself instead of libm's exp: compiled code binds its own symbols, and
    user-derived names avoid the ones it calls."""

    def f(x):
        return np.sin(x) * np.exp(x) + np.cos(x)

    f.__name__ = name
    assert cofactor.qjit(f)(0.3) == pytest.approx(np.sin(0.3) * np.exp(0.3) + np.cos(0.3))


def test_qnode_named_like_a_libm_function_under_grad():
    dev = qml.device("default.qubit", wires=1)

    @qml.qnode(dev)
    def exp(x):
        qml.RX(np.exp(x), 0)
        return qml.expval(qml.Z(0))

    @cofactor.qjit
    def step(x):
        return cofactor.grad(exp)(x) + np.tanh(x)

    expected = -np.sin(np.exp(0.3)) * np.exp(0.3) + np.tanh(0.3)
    assert step(0.3) == pytest.approx(expected, abs=1e-12)
